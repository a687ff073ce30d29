"""``python -m analyzer.native``: build the compiled core now (make setup does this)."""

from analyzer import native

path = native.build(verbose=True)
print(native.status() if path is None or native.library() is None else f"spigap core ready: {path}")
