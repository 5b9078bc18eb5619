"""``partctl ui``: the cluster page (server.py, the application and its HTTP server; pages.py,
the HTML)."""

from partctl.webui.pages import PageOptions
from partctl.webui.server import ClusterPage, Response, same_origin, serve

__all__ = ["ClusterPage", "PageOptions", "Response", "same_origin", "serve"]
