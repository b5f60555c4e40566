"""Template builders the feature workflows share: a ``sh -c`` container, a ``python -c`` one,
one that prints its input parameter ``msg``."""

from __future__ import annotations

from typing import Any

from hera.workflows import Container, Parameter

IMAGE = "python:3.11"

__all__ = ["IMAGE", "echo_input", "py", "sh"]


def sh(name: str, script: str, **kwargs: Any) -> Container:
    """A container template running ``sh -c SCRIPT`` (its stdout is ``outputs.result``)."""
    return Container(name=name, image=IMAGE, command=["sh", "-c"], args=[script], **kwargs)


def py(name: str, code: str, **kwargs: Any) -> Container:
    """A container template running ``python -c CODE``."""
    return Container(name=name, image=IMAGE, command=["python", "-c"], args=[code], **kwargs)


def echo_input(name: str = "say") -> Container:
    """A container template printing its input parameter ``msg`` exactly (its ``result``)."""
    return Container(
        name=name,
        image=IMAGE,
        command=["python", "-c", "import sys; print(sys.argv[1])"],
        args=["{{inputs.parameters.msg}}"],
        inputs=[Parameter(name="msg")],
    )
