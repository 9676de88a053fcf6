"""The intermediate representation: a typed tree of modules whose names are PyTorch attribute paths."""
