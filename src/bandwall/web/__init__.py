"""The local dashboard: FastAPI JSON API plus a small page, assets served locally."""

from bandwall.web.app import create_app

__all__ = ["create_app"]
