"""Logo URLs of the blocks; the square PNGs live in the repository under docs/assets/.

Prefect's client schema only accepts http(s) logo URLs, so the logos are served from the
repository rather than embedded as data: URLs.
"""

ASSETS_URL = "https://raw.githubusercontent.com/animus-flows/animus-flows/main/docs/assets/"
SQLITE_LOGO = ASSETS_URL + "sqlite-logo.png"
ZEP_LOGO = ASSETS_URL + "zep-logo.png"
JSONRPC_LOGO = ASSETS_URL + "jsonrpc-logo.png"
POSTGRES_LOGO = ASSETS_URL + "postgres-logo.png"
