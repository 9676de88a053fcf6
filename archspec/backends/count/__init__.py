"""The symbolic counter: parameters (and, later, FLOPs and memory) as sympy formulas."""
