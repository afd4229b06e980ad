"""The paper's prompt variants: what each step asks the editor for.

`replicate` is the paper's exact sentence. The paper does not print its rephrased, mirror,
rotate, object-addition or denoise wording, so those sentences are this project's own.
`mirror` and `rotate` are round trips (the original comes back every 2 and 4 steps), so they
carry a geometric `transform` that offline editors apply for real. The paper's multi-step
reconstructions (colour patches, then edges, then a reconstruction; monochrome, then recolour) are
plans, one prompt per step in turn, and, as in the paper, not used for IQA (`for_iqa`).
"""

from __future__ import annotations

from dataclasses import dataclass

from PIL import Image, ImageOps

REPLICATE = "Produce an exact replica of the provided image, with no alterations."
FRUITS = (
    "apple", "banana", "orange", "pear", "peach", "plum", "cherry", "lemon", "lime", "mango",
    "kiwi", "pineapple", "strawberry", "blueberry", "raspberry", "blackberry", "grape", "fig",
    "pomegranate", "apricot", "nectarine", "papaya", "guava", "passion fruit", "lychee",
    "persimmon", "quince", "coconut", "watermelon", "cantaloupe", "honeydew melon", "tangerine",
    "grapefruit", "clementine", "kumquat", "dragon fruit", "star fruit", "avocado", "date",
    "cranberry", "gooseberry", "mulberry", "elderberry", "durian", "jackfruit", "rambutan",
    "mangosteen", "longan", "loquat", "feijoa",
)  # fmt: skip
"""`add-fruits` asks for these in order, one per step, starting again after the last."""


@dataclass(frozen=True)
class Prompt:
    """A prompt variant; `text` may hold `{fruit}`, filled per step. A `plan` is asked in turn,
    one prompt per step, and `text` then names it."""

    name: str
    text: str
    transform: str | None = None
    plan: tuple[str, ...] = ()
    for_iqa: bool = True
    """False for the reconstruction plans: their steps change the image on purpose."""

    def for_step(self, step: int) -> str:
        if self.plan:
            return self.plan[(step - 1) % len(self.plan)]
        return (
            self.text.format(fruit=FRUITS[(step - 1) % len(FRUITS)]) if "{fruit}" in self.text else self.text
        )


def _plan(name: str, *steps: str) -> Prompt:
    return Prompt(name, " -> ".join(steps), plan=steps, for_iqa=False)


VARIANTS = {
    p.name: p
    for p in (
        Prompt("replicate", REPLICATE),
        Prompt("rephrase", "Create an identical copy of this image without changing anything in it."),
        Prompt(
            "mirror", "Flip this image horizontally, as in a mirror. Change nothing else.", transform="mirror"
        ),
        Prompt("rotate", "Rotate this image 90 degrees clockwise. Change nothing else.", transform="rotate"),
        Prompt("add-apples", "Add one more apple to the table. Keep everything else exactly the same."),
        Prompt("add-fruits", "Add a {fruit} to the table. Keep everything else exactly the same."),
        Prompt("denoise", "Remove the noise from this image. Change nothing else."),
        _plan(
            "reconstruct-patches",
            "Turn this image into flat patches of solid colour, one patch per region.",
            "Turn this image into a line drawing of its edges, black lines on white.",
            "Reconstruct a realistic photograph from this image.",
        ),
        _plan(
            "recolour",
            "Turn this image into a black-and-white photograph.",
            "Colourise this black-and-white photograph realistically.",
        ),
    )
}


def resolve(name: str, text: str | None = None) -> Prompt:
    """The named variant, or a custom prompt when `text` is given (named `name`, e.g. `custom`)."""
    if text is not None:
        if not text.strip():
            raise ValueError("--prompt-text is empty")
        return Prompt(name, text)
    if name not in VARIANTS:
        raise ValueError(
            f"unknown prompt {name!r}; choose one of {', '.join(VARIANTS)} or pass --prompt-text"
        )
    return VARIANTS[name]


def apply_transform(image: Image.Image, transform: str | None) -> Image.Image:
    """The exact geometric op a perfect editor would do for `transform`."""
    if transform is None:
        return image
    if transform == "mirror":
        return ImageOps.mirror(image)
    if transform == "rotate":
        return image.transpose(Image.Transpose.ROTATE_270)  # PIL turns counter-clockwise
    raise ValueError(f"unknown transform {transform!r}")
