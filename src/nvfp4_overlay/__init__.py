"""nvfp4-overlay: patched FlashInfer and SGLang wheels, built from the pinned upstream wheels."""

__version__ = "0.2.0"
