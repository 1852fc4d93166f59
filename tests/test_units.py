"""Quantities with units: parsing, errors that name the parameter, formatting round trips."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simcore.errors import ConfigError
from simcore.units import (
    format_bandwidth,
    format_bytes,
    format_number,
    format_seconds,
    parse_bandwidth,
    parse_duration,
    parse_size,
    parse_time_per_size,
)

# Three significant digits: the printed value is off by at most half a unit in the third digit,
# i.e. 0.5 % of a value whose leading digit is 1 (plus float noise).
FORMAT_REL_TOL = 0.005 * (1 + 1e-9)


@pytest.mark.parametrize(
    ("text", "bps"),
    [
        ("10Gbps", 10e9),
        ("25 Gbit/s", 25e9),
        ("1.25GB/s", 10e9),
        ("1.25GBps", 10e9),
        ("100Mbps", 100e6),
        ("100 Mb/s", 100e6),
        ("800MiB/s", 800 * 2**20 * 8),
        ("10kbps", 10e3),
        ("10Kbps", 10e3),
        ("1Gibit/s", 2**30),
        ("2.5e9bps", 2.5e9),
        (" 1 Tbps ", 1e12),
    ],
)
def test_parse_bandwidth(text: str, bps: float) -> None:
    assert parse_bandwidth(text) == pytest.approx(bps, rel=1e-12)


@pytest.mark.parametrize(
    ("text", "nbytes"),
    [
        ("64KiB", 65536),
        ("1MB", 1_000_000),
        ("512", 512),
        (512, 512),
        ("4 GiB", 4 * 2**30),
        ("1.5KB", 1500),
        ("1.23KiB", 1260),  # a prefixed value rounds to the nearest byte
        ("8Mb", 1_000_000),
        ("16bit", 2),
    ],
)
def test_parse_size(text: str | int, nbytes: int) -> None:
    assert parse_size(text) == nbytes


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("5ms", 5e-3),
        ("20us", 20e-6),
        ("20\u00b5s", 20e-6),
        ("20\u03bcs", 20e-6),
        ("1.5s", 1.5),
        ("100ns", 100e-9),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds, rel=1e-12)


def test_case_of_b_matters_and_m_is_never_mega() -> None:
    assert parse_bandwidth("1GBps") == 8 * parse_bandwidth("1Gbps")
    assert parse_size("1KB") == 8 * parse_size("1Kb")
    with pytest.raises(ConfigError, match="unknown unit 'mbps'"):
        parse_bandwidth("1mbps")


def test_si_is_decimal_and_iec_is_binary() -> None:
    assert parse_size("1KB") == 1000
    assert parse_size("1KiB") == 1024
    assert parse_size("1GiB") == 2**30


def test_plain_numbers_need_a_default_unit_for_bandwidth_and_duration() -> None:
    with pytest.raises(ConfigError, match="the unit is missing"):
        parse_bandwidth("10", name="--bandwidth")
    with pytest.raises(ConfigError, match="the unit is missing"):
        parse_duration(5, name="--timeout")
    assert parse_bandwidth("10", default_unit="Gbps") == 10e9
    assert parse_duration(5, default_unit="ms") == pytest.approx(5e-3)
    assert parse_size("2", default_unit="KiB") == 2048


def test_error_names_parameter_value_and_units() -> None:
    with pytest.raises(ConfigError) as info:
        parse_bandwidth("10Gbs", name="--bandwidth")
    message = str(info.value)
    assert message.startswith(
        "--bandwidth: '10Gbs' is not a bandwidth; use a number with a unit such as "
        "10Gbps, 1.25GB/s, 800Mbit/s"
    )
    assert "bit/s" in message and "Ki Mi Gi Ti" in message


@pytest.mark.parametrize("bad", ["x", "", "Gbps", "1 2 Gbps", "nan Gbps", "inf Gbps", "1e999Gbps"])
def test_bandwidth_garbage_is_rejected(bad: str) -> None:
    with pytest.raises(ConfigError, match=r"--bw: .* is not a bandwidth"):
        parse_bandwidth(bad, name="--bw")


def test_bool_is_not_a_number() -> None:
    with pytest.raises(ConfigError):
        parse_size(True)


@pytest.mark.parametrize(
    ("parse", "unit"),
    [(parse_bandwidth, "Gbps"), (parse_duration, "ms"), (parse_size, "KiB")],
    ids=["bandwidth", "duration", "size"],
)
def test_zero_and_negative(parse: Callable[..., float], unit: str) -> None:
    with pytest.raises(ConfigError, match=r"--q: '0\w+' must be > 0"):
        parse(f"0{unit}", name="--q")
    with pytest.raises(ConfigError, match=r"--q: '-1\w+' must be >= 0"):
        parse(f"-1{unit}", name="--q", positive=False)
    assert parse(f"0{unit}", positive=False) == 0


def test_sizes_must_be_whole_bytes_without_a_prefix() -> None:
    with pytest.raises(ConfigError, match="not a whole number of bytes"):
        parse_size("1.5")
    with pytest.raises(ConfigError, match="not a whole number of bytes"):
        parse_size("12b")
    with pytest.raises(ConfigError, match="less than one byte"):
        parse_size("0.0001KB")


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (10e9, "10.0 Gbit/s"),
        (1.25e9, "1.25 Gbit/s"),
        (100e6, "100 Mbit/s"),
        (999.6e6, "1.00 Gbit/s"),  # rounding to 1000 moves up a unit
        (0.5, "0.5 bit/s"),
    ],
)
def test_format_bandwidth(value: float, text: str) -> None:
    assert format_bandwidth(value) == text


def test_format_bytes_and_seconds() -> None:
    assert format_bytes(512) == "512 B"
    assert format_bytes(65536) == "64.0 KiB"
    assert format_bytes(3 * 2**30 // 2) == "1.50 GiB"
    assert format_seconds(0) == "0 s"
    assert format_seconds(20e-6) == "20.0 us"
    assert format_seconds(5e-3) == "5.00 ms"
    assert format_seconds(100e-9) == "100 ns"
    assert format_seconds(3600) == "3600 s"
    assert format_seconds(-0.002) == "-2.00 ms"
    assert format_seconds(math.inf) == "inf ns"


@given(st.floats(min_value=1.0, max_value=1e16))
def test_bandwidth_round_trip(bps: float) -> None:
    assert math.isclose(parse_bandwidth(format_bandwidth(bps)), bps, rel_tol=FORMAT_REL_TOL)


@given(st.integers(min_value=0, max_value=2**52))
def test_size_round_trip(nbytes: int) -> None:
    back = parse_size(format_bytes(nbytes), positive=False)
    assert abs(back - nbytes) <= FORMAT_REL_TOL * nbytes + 0.5  # + rounding to a whole byte
    if nbytes < 1024:
        assert back == nbytes


@given(st.floats(min_value=1e-9, max_value=1e6))
def test_seconds_round_trip(seconds: float) -> None:
    assert math.isclose(parse_duration(format_seconds(seconds)), seconds, rel_tol=FORMAT_REL_TOL)


@given(st.integers(min_value=1, max_value=10**6))
def test_prefixes_scale_exactly(k: int) -> None:
    assert parse_size(f"{k}KiB") == 1024 * k
    assert parse_size(f"{k}kB") == 1000 * k
    assert parse_bandwidth(f"{k}MB/s") == pytest.approx(8 * parse_bandwidth(f"{k}Mbps"))


@pytest.mark.parametrize(
    ("text", "seconds_per_byte"),
    [
        ("1ns/B", 1e-9),
        ("0.5us/KiB", 0.5e-6 / 1024),
        ("2ms/MB", 2e-3 / 1e6),
        ("1s/2B", 0.5),
        ("0s/B", 0.0),
        ("3ns / B", 3e-9),
    ],
)
def test_time_per_size(text: str, seconds_per_byte: float) -> None:
    assert parse_time_per_size(text, name="--x") == (pytest.approx(seconds_per_byte), False)


def test_a_bare_number_is_seconds_per_byte_and_says_so() -> None:
    assert parse_time_per_size("1e-9") == (1e-9, True)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("fast", "--x: 'fast' is not a time per size such as 1ns/B"),
        ("1ns/", "--x: '1ns/' is not a time per size"),
        ("/B", "--x: '/B' is not a time per size"),
        ("1parsec/B", "--x (time before /): '1parsec'"),
        ("1ns/0B", "--x (size after /): '0B' must be > 0"),
        ("1ns/furlong", "--x (size after /): '1furlong'"),
        ("-1", "--x: '-1' must be a finite number >= 0"),
        ("nan", "--x: 'nan' must be a finite number >= 0"),
    ],
)
def test_a_bad_time_per_size_names_the_option_and_the_form(text: str, says: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_time_per_size(text, name="--x")
    assert str(err.value).startswith(says), str(err.value)


@given(st.floats(min_value=1e-3, max_value=1e14))
def test_format_number_has_four_significant_digits(value: float) -> None:
    text = format_number(value)
    assert "e" not in text
    digits = text.replace(".", "").lstrip("0")
    assert len(digits) == 4 or ("." not in text and len(digits) >= 4), text
    assert float(text) == pytest.approx(value, rel=5e-4)


@pytest.mark.parametrize(
    ("value", "text"),
    [(16.6, "16.60"), (3.7361, "3.736"), (7.11, "7.110"), (9.9996, "10.00"), (0.0, "0"),
     (-2.5, "-2.500"), (123456.7, "123457"), (1e-5, "1.000e-05"), (math.inf, "inf")],
)  # fmt: skip
def test_format_number_keeps_trailing_zeros(value: float, text: str) -> None:
    assert format_number(value) == text
