"""The scripts around the tools; recipes/README.md says which folder is which."""
