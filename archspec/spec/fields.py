"""The metadata of a spec field, which validation, errors and docs read."""


def doc(text: str, **meta: object) -> dict[str, object]:
    """Field metadata: a description for docs and errors, plus constraints (e.g. positive=True)."""
    return {"doc": text, **meta}
