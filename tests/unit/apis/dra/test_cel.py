"""CEL selectors: kube's `device` variable, its libraries, compile-once, errors and the cost bound."""

from __future__ import annotations

import threading

import pytest

from apis.dra import cel
from apis.dra.slice import Device, DeviceCapacity
from apis.k8s.quantity import Quantity
from tests.unit.apis.dra.factories import DRIVER

DEVICE = Device.from_dict(
    {
        "name": "gpu-0",
        "attributes": {
            "model": {"string": "A100"},
            "minor": {"int": 3},
            "mig": {"bool": False},
            "driverVersion": {"version": "550.54.15"},
            "other.io/numa": {"ints": [0, 1]},
        },
        "capacity": {"memory": {"value": "80Gi"}, "other.io/cores": {"value": "100"}},
        "allowMultipleAllocations": True,
    },
    "spec.devices[0]",
)


@pytest.fixture
def compiler() -> cel.Compiler:
    return cel.Compiler()


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        (f'device.driver == "{DRIVER}"', True),
        ('device.driver == "nvidia.com"', False),
        (f'device.attributes["{DRIVER}"].model == "A100"', True),
        (f'device.attributes["{DRIVER}"].minor > 2', True),
        (f'device.attributes["{DRIVER}"].mig', False),
        ('1 in device.attributes["other.io"].numa', True),
        (f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0', True),
        (f'device.capacity["{DRIVER}"].memory.isGreaterThan(quantity("80Gi"))', False),
        (f'device.capacity["{DRIVER}"].memory == quantity("81920Mi")', True),
        ('device.capacity["other.io"].cores.isLessThan(quantity("101"))', True),
        ('quantity("1.5").add(quantity("500m")) == quantity("2")', True),
        ('quantity("2").sub(1).asInteger() == 1', True),
        ('quantity("500m").isInteger()', False),
        ('isQuantity("1Gi") && !isQuantity("lots")', True),
        (f'device.attributes["{DRIVER}"].driverVersion.isGreaterThan(semver("550.0.0"))', True),
        (f'device.attributes["{DRIVER}"].driverVersion.major() == 550', True),
        ('semver("1.0.0-rc.1").isLessThan(semver("1.0.0"))', True),
        ("device.allowMultipleAllocations", True),
        ('has(device.attributes["nvidia.com"].model)', False),
        ('!("model" in device.attributes["nvidia.com"])', True),
        (f'cel.bind(d, device.attributes["{DRIVER}"], d.model.startsWith("A") && d.minor == 3)', True),
        (f'device.attributes["{DRIVER}"].model.lowerAscii() == "a100"', True),
    ],
)
def test_device_variable_as_kube(compiler: cel.Compiler, expression: str, expected: bool) -> None:
    assert compiler.compile(expression).matches(DEVICE, DRIVER) is expected


def test_each_expression_compiles_once(compiler: cel.Compiler) -> None:
    for _ in range(3):
        compiler.compile('device.driver == "a"')
        compiler.compile('device.driver == "b"')
    assert compiler.compilations == 2


def test_compile_errors_are_clear_and_cached(compiler: cel.Compiler) -> None:
    with pytest.raises(cel.CELCompileError, match="undeclared reference to 'devic.driver'"):
        compiler.compile('devic.driver == "x"')
    with pytest.raises(cel.CELCompileError, match="Syntax error"):
        compiler.compile("device.driver ==")
    with pytest.raises(cel.CELCompileError, match="must evaluate to bool, not int"):
        compiler.compile("1 + 1")
    with pytest.raises(cel.CELCompileError, match="no matching overload for 'compareTo'"):
        compiler.compile('quantity("1").compareTo(semver("1.0.0")) == 0')
    with pytest.raises(cel.CELCompileError, match="more than the 10240 allowed"):
        compiler.compile("true && " * 2000 + "true")
    before = compiler.compilations
    with pytest.raises(cel.CELCompileError):
        compiler.compile('devic.driver == "x"')
    assert compiler.compilations == before


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        (f'device.attributes["{DRIVER}"].nope == 1', "Key not found in map"),
        ("device.driver", "must evaluate to bool, got string"),
        ('quantity("lots") == quantity("1")', "does not match the quantity grammar"),
        (f'device.attributes["{DRIVER}"].model > 3', "No matching overloads"),
    ],
    ids=["missing-attribute", "not-bool", "bad-quantity-literal", "wrong-type"],
)
def test_runtime_errors_are_clear(compiler: cel.Compiler, expression: str, message: str) -> None:
    program = compiler.compile(expression)
    with pytest.raises(cel.CELRuntimeError, match=message) as e:
        program.matches(DEVICE, DRIVER)
    assert e.value.expression == expression


def test_runaway_expression_is_refused(compiler: cel.Compiler) -> None:
    big = "[" + ",".join(str(i) for i in range(200)) + "]"
    program = compiler.compile(f"{big}.all(a, {big}.all(b, a + b >= 0))")  # 40,000 iterations
    with pytest.raises(cel.CELCostError, match="budget of 10000 comprehension iterations"):
        program.matches(DEVICE, DRIVER)
    small = "[" + ",".join(str(i) for i in range(50)) + "]"
    assert compiler.compile(f"{small}.all(a, {small}.all(b, a + b >= 0))").matches(DEVICE, DRIVER)


def test_cache_is_bounded() -> None:
    compiler = cel.Compiler(cache_size=2)
    for name in ("a", "b", "c", "a"):
        compiler.compile(f'device.driver == "{name}"')
    assert compiler.compilations == 4  # "a" was evicted by "c"


def test_each_expression_is_evaluated_once_per_device(compiler: cel.Compiler) -> None:
    selects = compiler.compile(f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].minor == 3')
    for _ in range(3):
        assert selects.matches(DEVICE, DRIVER)
    assert (compiler.evaluations, compiler.cached) == (1, 2)
    # Another device object (an updated slice): evaluated anew, its own answer.
    other = Device.from_dict({"name": "gpu-0", "attributes": {"minor": {"int": 4}}}, "spec.devices[1]")
    assert not selects.matches(other, DRIVER)
    # The same device under another driver is another `device` variable.
    assert not selects.matches(DEVICE, "nvidia.com")
    assert compiler.evaluations == 3
    assert compiler.evaluation_seconds > 0


def test_runtime_errors_are_kept_with_the_answers(compiler: cel.Compiler) -> None:
    program = compiler.compile(f'device.attributes["{DRIVER}"].nope == 1')
    for _ in range(2):
        with pytest.raises(cel.CELRuntimeError, match="Key not found in map"):
            program.matches(DEVICE, DRIVER)
    assert (compiler.evaluations, compiler.cached) == (1, 1)


def test_a_program_evaluates_on_any_thread(compiler: cel.Compiler) -> None:
    """The scheduler evaluates on its worker threads: a device seen on one thread is evaluated on
    another (cel-cpp activations are per thread)."""
    device = Device(name="gpu-0", capacity={"memory": DeviceCapacity(Quantity.from_int(80 * 2**30))})
    program = compiler.compile(f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0')
    # The same literals, so the same converted variable would serve it: on this thread, its own.
    other = compiler.compile(f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) > 0')
    results: list[bool] = []
    worker = threading.Thread(target=lambda: results.append(program.matches(device, DRIVER)))
    worker.start()
    worker.join()
    results.append(other.matches(device, DRIVER))
    results.append(program.matches(device, DRIVER))  # the answer is kept, whatever the thread
    assert results == [True, True, True]
    assert (compiler.evaluations, compiler.cached) == (2, 1)
