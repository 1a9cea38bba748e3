import torch

import torch_xla.core.xla_model as xm
from tests.compare import EXACT, assert_same


def test_manual_seed_makes_draws_reproducible(dev):
    torch.manual_seed(7)
    a = torch.randn(4, 4, device=dev).cpu()
    torch.manual_seed(7)
    b = torch.randn(4, 4, device=dev).cpu()
    torch.manual_seed(8)
    c = torch.randn(4, 4, device=dev).cpu()
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


def test_successive_draws_differ(dev):
    a = torch.rand(100, device=dev)
    b = torch.rand(100, device=dev)
    assert not torch.equal(a.cpu(), b.cpu())
    assert 0 <= a.min().item() and a.max().item() < 1


def test_dropout_masks_differ_step_to_step_without_recompiling(dev):
    torch.manual_seed(0)
    x = torch.ones(1000, device=dev)
    masks = []
    for _ in range(3):
        y = torch.nn.functional.dropout(x, 0.5, training=True)
        xm.mark_step()
        masks.append(y.cpu())
    assert not torch.equal(masks[0], masks[1])
    kept = (masks[0] != 0).float().mean().item()
    assert 0.4 < kept < 0.6
    assert set(masks[0].unique().tolist()) <= {0.0, 2.0}


def test_set_and_get_rng_state(dev):
    xm.set_rng_state(123, dev)
    assert xm.get_rng_state(dev) == 123
    a = torch.randn(3, device=dev).cpu()
    xm.set_rng_state(123, dev)
    assert_same(torch.randn(3, device=dev), a, **EXACT)


def test_rng_state_restores_the_stream_exactly(dev):
    torch.manual_seed(3)
    torch.rand(5, device=dev)
    state = xm.get_rng_state(dev)
    a = torch.rand(5, device=dev).cpu()
    b = torch.randn(2, device=dev).cpu()
    xm.set_rng_state(state, dev)
    assert_same(torch.rand(5, device=dev), a, **EXACT)
    assert_same(torch.randn(2, device=dev), b, **EXACT)


def test_sampling_ops_are_lowered_and_follow_their_laws(dev):
    from tests.conftest import fallbacks
    import torch_xla.debug.metrics as met
    torch.manual_seed(1)
    met.clear_counters()
    probs = torch.tensor([0.1, 0.0, 0.6, 0.3], device=dev)
    picks = torch.multinomial(probs, 3).cpu()
    assert sorted(picks.tolist()) == [0, 2, 3]  # without replacement, never the zero
    draws = torch.multinomial(probs, 4000, replacement=True).cpu()
    assert abs((draws == 2).float().mean().item() - 0.6) < 0.05 and not (draws == 1).any()
    g = torch.empty(4000, device=dev).geometric_(0.25).cpu()
    assert g.min() >= 1 and abs(g.mean().item() - 4.0) < 0.3
    p = torch.poisson(torch.full((4000,), 3.0, device=dev)).cpu()
    assert abs(p.mean().item() - 3.0) < 0.2
    assert torch.randint_like(torch.ones(100, device=dev), 3, 9).cpu().unique().tolist() == [3., 4., 5., 6., 7., 8.]
    assert sorted(torch.randperm(6, device=dev).cpu().tolist()) == list(range(6))
    assert not fallbacks()


def test_complex_uniform_draws_both_parts(dev):
    """uniform_ of a complex tensor fills its real and imaginary parts, as on the CPU."""
    for dtype in (torch.complex64, torch.complex128):
        x = torch.empty(4000, dtype=dtype, device=dev).uniform_(-2, 3)
        parts = torch.view_as_real(x.cpu())
        assert x.dtype == dtype and parts.min() >= -2 and parts.max() < 3
        assert abs(parts.mean().item() - 0.5) < 0.1 and parts[:, 0].std() > 1
        assert torch.rand(3, dtype=dtype, device=dev).cpu().dtype == dtype


def test_random_ops_check_their_arguments_as_on_the_cpu(dev):
    """uniform_'s bounds and multinomial's sample counts, categories and dtypes are checked
    at the op with the CPU's messages; the checks leave the CPU's random stream alone."""
    import pytest
    state = torch.get_rng_state()
    with pytest.raises(RuntimeError, match=r"uniform_ expects to return a \[from, to\) range"):
        torch.empty(3, device=dev).uniform_(3, -1)
    probs = torch.rand(2, 4, device=dev)
    for kwargs, message in [({"num_samples": 0}, "cannot sample n_sample <= 0 samples"),
                            ({"num_samples": 5}, "cannot sample n_sample > prob_dist"),
                            ({"num_samples": 1, "input": probs.long()}, "floating-point dtypes")]:
        with pytest.raises(RuntimeError, match=message):
            torch.multinomial(kwargs.pop("input", probs), **kwargs)
    draws = torch.multinomial(probs, 3).cpu()
    assert draws.shape == (2, 3) and draws.dtype == torch.int64
    assert torch.equal(torch.get_rng_state(), state)


def test_random_interval_is_checked_as_on_the_cpu(dev):
    import pytest
    for dtype, low, high in [(torch.float32, 3, 1), (torch.float16, 3, 65506)]:
        with pytest.raises(RuntimeError) as cpu:
            torch.empty(4, dtype=dtype).random_(low, high)
        with pytest.raises(RuntimeError) as xla:
            torch.empty(4, dtype=dtype, device=dev).random_(low, high)
        assert str(xla.value) == str(cpu.value)
    drawn = torch.empty(64, device=dev).random_(2, 5).cpu()
    assert drawn.min() >= 2 and drawn.max() < 5
