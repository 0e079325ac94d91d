"""Benchmarks (``python manage.py bench …``): measured figures, never asserted in tests."""
