"""What the instructor tests extract: a model whose validator rejects a first answer."""

from __future__ import annotations

import pydantic


class User(pydantic.BaseModel):
    name: str
    age: int

    @pydantic.field_validator("name")
    @classmethod
    def shouted(cls, value: str) -> str:
        if value != value.upper():
            raise ValueError("name must be upper case")
        return value
