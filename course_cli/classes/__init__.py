"""A class: submissions found by one rule, one dispatch loop over an Executor (a local pool or Dask), the journal."""
