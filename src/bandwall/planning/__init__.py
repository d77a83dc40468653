"""Plans: a request (one schema) → the engine → the fastest feasible layout and its metrics.

`request` is the schema, `presets` and `resolve` turn it into model inputs, `api` holds plan,
sweep, compare and scale.
"""
