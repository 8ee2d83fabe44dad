"""Statistics that only the benchmarks use: the service, its pages and its worker never call them."""
