"""Refusing inputs longer than the model was built for."""


def check_length(length: int, max_seq_len: int) -> None:
    """Refuse more positions than the model has (position table, trained angles)."""
    if length > max_seq_len:
        raise ValueError(f"{length} positions exceed max_seq_len = {max_seq_len}")
