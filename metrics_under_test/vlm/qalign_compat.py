"""pyiqa's Q-Align on transformers 5: the one helper its mPLUG-Owl2 needs that transformers dropped.

pyiqa 0.1.16's visual abstractor (`MplugOwlVisualAbstractorModel.forward`) calls
`self.invert_attention_mask`, a `ModuleUtilsMixin` method transformers 5 removed, so every
Q-Align forward raised AttributeError there. `restore_invert_attention_mask` puts transformers
4's method back on that class alone, unchanged, and only when the class lacks it (on
transformers<5 it inherits the original, and nothing is touched). It is applied when the suite
loads Q-Align, so a process that never scores Q-Align is left as it was.
"""

from __future__ import annotations

from typing import Any


def invert_attention_mask(self: Any, encoder_attention_mask: Any) -> Any:
    """transformers 4.x `ModuleUtilsMixin.invert_attention_mask`: a 2-D or 3-D mask of 1 (attend)
    and 0 (masked) becomes an additive mask broadcast over the heads, 0 where attended and the
    dtype's lowest value where masked, in the model's dtype."""
    import torch

    if encoder_attention_mask.dim() == 3:
        extended = encoder_attention_mask[:, None, :, :]
    if encoder_attention_mask.dim() == 2:
        extended = encoder_attention_mask[:, None, None, :]
    extended = extended.to(dtype=self.dtype)  # fp16 compatibility
    return (1.0 - extended) * torch.finfo(self.dtype).min


def restore_invert_attention_mask(model_class: type) -> bool:
    """Give `model_class` transformers 4's `invert_attention_mask` if it has none; True if added."""
    if hasattr(model_class, "invert_attention_mask"):
        return False
    model_class.invert_attention_mask = invert_attention_mask  # type: ignore[attr-defined]
    return True


def apply() -> None:
    """Make pyiqa's Q-Align run on the installed transformers (a no-op on transformers<5)."""
    from pyiqa.archs.q_align.visual_encoder import MplugOwlVisualAbstractorModel

    restore_invert_attention_mask(MplugOwlVisualAbstractorModel)
