import pytest
import torch

from isotropy import IsotropyError
from isotropy.encoders.poolings import POOLINGS, parse_pooling, pool


@pytest.mark.parametrize(
    "name, kind, layers",
    [
        ("cls", "cls", (-1,)),
        ("pooler", "pooler", ()),
        ("last-avg", "avg", (-1,)),
        ("mean", "avg", (-1,)),
        ("first-last-avg", "avg", (1, -1)),
        ("first_last_avg", "avg", (1, -1)),
        ("embed-last-avg", "avg", (0, -1)),
        ("last2-avg", "avg", (-2, -1)),
        ("layers-avg:0,2,-1", "avg", (0, 2, -1)),
    ],
)
def test_parse(name, kind, layers):
    p = parse_pooling(name)
    assert (p.kind, p.layers) == (kind, layers)


def test_unknown_pooling_lists_the_valid_ones():
    with pytest.raises(IsotropyError) as err:
        parse_pooling("max")
    for name in POOLINGS:
        assert name in str(err.value)
    assert "\n" not in str(err.value)


def test_last2avg_is_refused_as_ambiguous():
    with pytest.raises(IsotropyError, match="first-last-avg"):
        parse_pooling("last2avg")


@pytest.mark.parametrize("bad", ["layers-avg:", "layers-avg:a,b", "layers-avg:1,1"])
def test_bad_layer_lists(bad):
    with pytest.raises(IsotropyError):
        parse_pooling(bad)


def test_layer_out_of_range_is_named():
    with pytest.raises(IsotropyError, match="hidden state 9"):
        parse_pooling("layers-avg:0,9").resolve_layers(7)


def test_average_ignores_padding():
    torch.manual_seed(0)
    h1, h2 = torch.randn(2, 5, 4), torch.randn(2, 5, 4)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    # garbage in the padded positions must not change anything
    h1b, h2b = h1.clone(), h2.clone()
    h1b[0, 3:] = 1e6
    h2b[0, 3:] = -1e6
    a = pool(parse_pooling("first-last-avg"), (torch.zeros(2, 5, 4), h1, h2), mask)
    b = pool(parse_pooling("first-last-avg"), (torch.zeros(2, 5, 4), h1b, h2b), mask)
    assert torch.allclose(a, b)
    expected = (h1[0, :3].mean(0) + h2[0, :3].mean(0)) / 2
    assert torch.allclose(a[0], expected, atol=1e-6)
    # embed-last-avg reads index 0, last2-avg the last two
    e = pool(parse_pooling("embed-last-avg"), (h1, torch.zeros(2, 5, 4), h2), mask)
    assert torch.allclose(e[1], (h1[1].mean(0) + h2[1].mean(0)) / 2, atol=1e-6)


def test_cls_is_first_token_of_last_layer():
    h = torch.randn(3, 4, 2)
    out = pool(parse_pooling("cls"), (torch.zeros_like(h), h), torch.ones(3, 4))
    assert torch.equal(out, h[:, 0])


def test_pooler_without_output_is_a_clear_error():
    with pytest.raises(IsotropyError, match="no pooler"):
        pool(parse_pooling("pooler"), (torch.zeros(1, 2, 3),), torch.ones(1, 2), None)
