"""Tiny randomly initialised diffusers pipelines, built from configs and saved as local model
folders, so the diffusers editor loads and calls the real pipeline classes offline in seconds.

The components follow diffusers' own test configs, shrunk further; the tokenizers are word-level
ones written here (the real ones are hub files). Heavy imports stay inside the functions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

WORDS = ("produce", "an", "exact", "replica", "of", "the", "provided", "image", "with", "no", "alterations")


def tokenizer(max_length: int) -> Any:
    """A word-level tokenizer for the words of the replicate prompt (others map to <unk>)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<unk>": 1, "</s>": 2, **{word: i + 3 for i, word in enumerate(WORDS)}}
    words = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=words,
        pad_token="<pad>",
        unk_token="<unk>",
        eos_token="</s>",
        model_max_length=max_length,
    )


def clip_text_encoder() -> Any:
    from transformers import CLIPTextConfig, CLIPTextModel

    config = CLIPTextConfig(
        bos_token_id=0, eos_token_id=2, pad_token_id=0, vocab_size=32, hidden_size=32, intermediate_size=37,
        num_attention_heads=4, num_hidden_layers=1, projection_dim=32, max_position_embeddings=16,
    )  # fmt: skip
    return CLIPTextModel(config)


def vae(latent_channels: int, **flux: Any) -> Any:
    """Two blocks: `vae_scale_factor` 2, so sizes must be multiples of 2 (Kontext: of 4)."""
    from diffusers import AutoencoderKL

    return AutoencoderKL(
        in_channels=3, out_channels=3, block_out_channels=(4, 4), layers_per_block=1, norm_num_groups=1,
        down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2,
        latent_channels=latent_channels, mid_block_add_attention=False, sample_size=32, **flux,
    )  # fmt: skip


def flux_kontext(folder: Path) -> Path:
    """A FluxKontextPipeline saved in `folder`."""
    import torch
    from diffusers import FlowMatchEulerDiscreteScheduler, FluxKontextPipeline, FluxTransformer2DModel
    from transformers import T5Config, T5EncoderModel

    torch.manual_seed(0)
    transformer = FluxTransformer2DModel(
        patch_size=1, in_channels=4, num_layers=1, num_single_layers=1, attention_head_dim=16,
        num_attention_heads=2, joint_attention_dim=32, pooled_projection_dim=32, axes_dims_rope=[4, 4, 8],
    )  # fmt: skip
    t5 = T5EncoderModel(T5Config(vocab_size=32, d_model=32, d_kv=8, d_ff=37, num_layers=1, num_heads=4))
    FluxKontextPipeline(
        scheduler=FlowMatchEulerDiscreteScheduler(), vae=vae(
            latent_channels=1, shift_factor=0.0609, scaling_factor=1.5035, use_quant_conv=False,
            use_post_quant_conv=False,
        ), text_encoder=clip_text_encoder(),
        tokenizer=tokenizer(16), text_encoder_2=t5, tokenizer_2=tokenizer(16), transformer=transformer,
    ).save_pretrained(folder)  # fmt: skip
    return folder


def instruct_pix2pix(folder: Path) -> Path:
    """A StableDiffusionInstructPix2PixPipeline (its `__call__` takes **kwargs) saved in `folder`."""
    import torch
    from diffusers import (
        EulerAncestralDiscreteScheduler,
        StableDiffusionInstructPix2PixPipeline,
        UNet2DConditionModel,
    )

    torch.manual_seed(0)
    unet = UNet2DConditionModel(
        block_out_channels=(4, 8), layers_per_block=1, sample_size=16, in_channels=8, out_channels=4,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        cross_attention_dim=32, norm_num_groups=2, attention_head_dim=4,
    )  # fmt: skip
    StableDiffusionInstructPix2PixPipeline(
        vae=vae(latent_channels=4), text_encoder=clip_text_encoder(), tokenizer=tokenizer(16), unet=unet,
        scheduler=EulerAncestralDiscreteScheduler(), safety_checker=None, feature_extractor=None,
        requires_safety_checker=False,
    ).save_pretrained(folder)  # fmt: skip
    return folder
