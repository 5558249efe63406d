"""Replica audit: compare every replica of every partition below the high watermark."""
