"""Resumable streams (the stored chunks of a reply) and what produces them."""
