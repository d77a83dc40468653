"""`bandwall calibrate --from-log`: the CLI shell over the compute-profile fit."""

from __future__ import annotations

from typing import Any

from bandwall.errors import ConfigError
from bandwall.report.text import console, print_json


def calibrate_from_log(
    log_path: str, fields: dict[str, Any], from_result: Any, name: str, as_json: bool
) -> None:
    """Fit one compute-efficiency constant to LOG for the job the configs describe (or the
    log's own Megatron arguments) and save it as compute profile NAME."""
    from bandwall.catalog.loader import check_profile_name
    from bandwall.measure.calibrate.compute_profile import fit_efficiency, save_compute_profile
    from bandwall.measure.importers.run_compare import request_for_log
    from bandwall.measure.importers.training_log import read_log
    from bandwall.planning.request import make_request

    check_profile_name(name)
    if from_result is not None:
        request = make_request(**fields)
        configs = [path for path, _ in from_result.files]
    else:
        try:
            request, result = request_for_log(log_path, None, fields)
        except ConfigError:
            raise ConfigError(
                "give the logged job's config with --from (a launch script, YAML, TOML or "
                "JSON): the log does not start with Megatron's arguments",
                field="from",
            ) from None
        configs = [path for path, _ in result.files]
    log = read_log(log_path, field_name="from_log")
    fit = fit_efficiency(log, request)
    fit["profile"] = save_compute_profile(name, fit, log_path, configs)
    fit["name"] = name
    if as_json:
        print_json(fit)
        return
    console.print(
        f"compute efficiency {fit['gemm_efficiency']:.3f} (p10-p90 "
        f"{fit['gemm_efficiency_p10']:.3f}-{fit['gemm_efficiency_p90']:.3f}; catalog "
        f"{fit['catalog_gemm_efficiency']:.3f}) makes the model's step "
        f"{fit['predicted_step_s']:,.4g} s match the log's median of {fit['fitted_steps']} "
        f"fitted steps (the catalog's gives {fit['catalog_step_s']:,.4g} s); "
        f"{fit['held_out_steps']} held-out steps: median |error| "
        f"{fit['held_out_median_abs_error']:.1%}, bias {fit['held_out_bias']:+.1%} "
        f"(fit: {fit['fit_median_abs_error']:.1%})",
        markup=False,
        highlight=False,
    )
    console.print(f"saved {fit['profile']}: use --profile {name}", markup=False, highlight=False)
