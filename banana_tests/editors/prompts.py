"""The paper's prompt variants: what each step asks the editor for.

`replicate` is the paper's exact sentence. The paper does not print its rephrased, mirror,
rotate, object-addition or denoise wording, so those sentences are this project's own.
`mirror` and `rotate` are round trips (the original comes back every 2 and 4 steps), so they
carry a geometric `transform` that offline editors apply for real.
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
    """A prompt variant; `text` may hold `{fruit}`, filled per step."""

    name: str
    text: str
    transform: str | None = None

    def for_step(self, step: int) -> str:
        return (
            self.text.format(fruit=FRUITS[(step - 1) % len(FRUITS)]) if "{fruit}" in self.text else self.text
        )


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
