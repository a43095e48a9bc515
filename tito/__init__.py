"""tito: build, export and grade the TinyTorch course."""
