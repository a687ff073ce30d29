"""``python -m analyzer.native``: which engine this installation runs."""

from analyzer import native

print(f"spigap engine: {native.engine()} ({native.status()})")
