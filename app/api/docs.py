"""The API's documents: OpenAPI with every schema, and the Swagger UI and ReDoc pages without internet.

FastAPI's default pages load their scripts from a CDN, so on a host with no internet they are
blank. The scripts come instead from the ``fastapi-offline`` package's files, served under
``/docs-static``.
"""

from pathlib import Path

import fastapi_offline
from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.openapi.utils import (
    get_openapi,
    validation_error_definition,
    validation_error_response_definition,
)
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from app.api.security_headers import script_policy
from app.schemas.sweep import SweepSpec

ASSETS = Path(fastapi_offline.__file__).parent / "static"
STATIC = "/docs-static"


def install(app: FastAPI) -> None:
    app.mount(STATIC, StaticFiles(directory=ASSETS), name="docs-static")

    @app.get("/docs", include_in_schema=False)
    def swagger() -> HTMLResponse:
        return _with_policy(get_swagger_ui_html(
            openapi_url=app.openapi_url,
            title=f"{app.title} API",
            swagger_js_url=f"{STATIC}/swagger-ui-bundle.js",
            swagger_css_url=f"{STATIC}/swagger-ui.css",
            swagger_favicon_url=f"{STATIC}/favicon.png",
        ))

    @app.get("/redoc", include_in_schema=False)
    def redoc() -> HTMLResponse:
        return _with_policy(get_redoc_html(
            openapi_url=app.openapi_url,
            title=f"{app.title} API",
            redoc_js_url=f"{STATIC}/redoc.standalone.js",
            redoc_favicon_url=f"{STATIC}/favicon.png",
            with_google_fonts=False,
        ))

    app.openapi = lambda: _openapi(app)


def _with_policy(page: HTMLResponse) -> HTMLResponse:
    page.headers["Content-Security-Policy"] = script_policy(bytes(page.body).decode())
    return page


def _openapi(app: FastAPI) -> dict:
    """FastAPI's schema plus SweepSpec, which the sweep route parses itself (JSON or YAML), and the 422
    shapes: every route lists its 422 itself (app.api.responses), so FastAPI adds none of its own."""
    if app.openapi_schema is None:
        schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        spec_schema = SweepSpec.model_json_schema(ref_template="#/components/schemas/{model}")
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        components.update(spec_schema.pop("$defs", {}))
        components["SweepSpec"] = spec_schema
        components["ValidationError"] = validation_error_definition
        components["HTTPValidationError"] = validation_error_response_definition
        app.openapi_schema = schema
    return app.openapi_schema
