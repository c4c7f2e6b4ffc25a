"""hostile shim: raises an error whose text holds ANSI escapes when it is imported."""

raise ValueError("\x1b[31mred\x1b]0;pwned\x07")
