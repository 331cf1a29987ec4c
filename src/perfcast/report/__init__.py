"""Presenting results: model sets as text, JSON, Python or LaTeX."""

from perfcast.report.models import STYLES, render_models

__all__ = ["STYLES", "render_models"]
