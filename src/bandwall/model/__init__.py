"""The cost model: pure, vectorised terms over numpy arrays, and the one place that composes
them (`bandwall.model.engine`).

Each term is a small function with units in its name and its source in its docstring; none
does I/O. The model reads catalog and workload types but nothing from plan, measure, report,
web or cli (an import contract in the tests enforces the direction).
"""
