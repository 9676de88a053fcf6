"""The intermediate representation: a typed tree of modules named by PyTorch attribute paths."""
