"""Shared fixtures for the unit and in-process tests."""
