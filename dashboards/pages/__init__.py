"""One module per page, each with its template; ``dashboards.views`` gathers their routers."""
