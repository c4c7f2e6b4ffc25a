"""A protocol's component whose class body never finishes when the module is loaded."""


class TokenStager:
    while True:
        pass
