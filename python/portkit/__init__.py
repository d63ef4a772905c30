"""portkit's Python companion: the parts of portkit that must run inside a PyTorch process.

Depends only on torch and numpy; works with Debian's python3-torch (1.13) and torch 2.x.
"""
