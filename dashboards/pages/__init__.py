"""The HTML pages, one module each with its template; their routers gathered into one."""

from fastapi import APIRouter

from dashboards.pages import alarms, calibration, compare, crashes, fallback, history, index, matrix, noise, serving, sweep

router = APIRouter(include_in_schema=False)
for page in (index, sweep, fallback, matrix, serving, alarms, compare, history, calibration, crashes, noise):
    router.include_router(page.router)
