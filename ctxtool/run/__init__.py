"""Running an operation over files: the runner, serial and parallel parts, the pool, engines."""
