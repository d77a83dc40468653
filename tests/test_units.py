import numpy as np
import pytest

from bandwall.errors import ConfigError
from bandwall.units import (
    format_size,
    parse_count,
    parse_duration_s,
    parse_rate_Gbps,
    parse_size,
    parse_size_range,
)


def test_sizes_use_binary_suffixes_like_nccl_tests() -> None:
    assert parse_size("1K") == 1024
    assert parse_size("8M") == 8 * 1024**2
    assert parse_size("2G") == 2 * 1024**3
    assert parse_size("4096") == 4096
    assert parse_size("1KiB") == 1024
    assert parse_size("1 GiB") == 1024**3


@pytest.mark.parametrize("text", ["100GB", "1kb", "8 MB"])
def test_decimal_looking_sizes_are_refused_with_both_spellings(text: str) -> None:
    """'100GB' is 1e11 bytes to most readers and 100 GiB to nccl-tests': neither is guessed."""
    with pytest.raises(ConfigError, match=r"ambiguous: write .*iB for binary .*e\d+") as err:
        parse_size(text)
    assert err.value.field == "size"


def test_size_range_default_factor_two_and_explicit_steps() -> None:
    assert parse_size_range("1K:8K").tolist() == [1024, 2048, 4096, 8192]
    assert parse_size_range("1K:64K:x4").tolist() == [1024, 4096, 16384, 65536]
    assert parse_size_range("1K:3K:+1K").tolist() == [1024, 2048, 3072]
    assert parse_size_range("8,1M").tolist() == [8, 1024**2]
    assert parse_size_range("1G").tolist() == [1024**3]


@pytest.mark.parametrize(
    "bad", ["12Q", "", "-1K", "1.5", "K", "1K:8G:x1", "8K:1K", "1:2:3:4", "1K:8K:y2"]
)
def test_malformed_sizes_raise_config_error_naming_the_field(bad: str) -> None:
    with pytest.raises(ConfigError, match=r"^sizes"):
        parse_size_range(bad, "sizes")


def test_rates_bits_and_bytes() -> None:
    assert parse_rate_Gbps("15Gbps") == pytest.approx(15)
    assert parse_rate_Gbps("200mbit") == pytest.approx(0.2)
    assert parse_rate_Gbps("50GBps") == pytest.approx(400)
    with pytest.raises(ConfigError, match="bandwidth"):
        parse_rate_Gbps("fast")


def test_durations_and_counts() -> None:
    assert parse_duration_s("200us") == pytest.approx(200e-6)
    assert parse_duration_s("5ms") == pytest.approx(5e-3)
    assert parse_count("1T") == 1e12
    assert parse_count("300B") == 3e11
    with pytest.raises(ConfigError):
        parse_duration_s("soon")


def test_format_size_round_trips() -> None:
    for text in ("1K", "8M", "2G", "100", "99999K", "4T"):
        assert format_size(parse_size(text)) == text


def test_format_size_reads_when_not_a_whole_number_of_units() -> None:
    # 2e12 bytes is 1,953,125,000 KiB: one decimal of the largest unit instead
    assert format_size(2e12) == "1.8T"
    assert format_size(1e9) == "953.7M"
    assert format_size(100_000 * 1024) == "97.7M"  # 100,000 K is not written out
    assert format_size(99_999) == "99999"
    assert np.all(parse_size_range("1K:1G:x32") > 0)
