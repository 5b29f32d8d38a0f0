"""Classification tasks: the synthetic recipe, digits, an image folder, and the errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from qpriv.classification.data import SYNTHETIC_RECIPE, load_task, synthetic_recipe_digest
from qpriv.errors import InvalidInputError


def test_synthetic_task_follows_the_recipe_and_is_reproducible() -> None:
    data = load_task("synthetic")
    assert data.kind == "tabular" and data.n_classes == 4 and data.n_features == 16
    assert len(data.y_train) + len(data.y_test) == 2048
    assert len(data.y_test) == round(0.2 * 2048)
    counts = torch.bincount(torch.cat([data.y_train, data.y_test]), minlength=4)
    assert int(counts.min()) > 400  # balanced up to the flipped labels
    again = load_task("synthetic")
    torch.testing.assert_close(data.x_train, again.x_train)
    assert data.summary()["recipe_kwargs"] == SYNTHETIC_RECIPE
    # another split seed keeps the dataset and reshuffles the split
    other = load_task("synthetic", seed=7)
    assert not torch.equal(other.y_test, data.y_test)
    pooled = torch.cat([data.x_train, data.x_test]).sum(0)
    torch.testing.assert_close(torch.cat([other.x_train, other.x_test]).sum(0), pooled,
                               rtol=1e-5, atol=1e-3)


def test_the_synthetic_task_separates_a_linear_probe_to_its_label_noise_ceiling(
        monkeypatch) -> None:
    # class_sep = 2 with 10 % of labels re-drawn: a linear classifier on the raw features is
    # within a few points of 1 - 0.1 x 3/4 = 0.925, so capacity is not what limits the models
    from sklearn.linear_model import LogisticRegression

    data = load_task("synthetic")
    probe = LogisticRegression(max_iter=2000).fit(data.x_train.numpy(), data.y_train.numpy())
    accuracy = probe.score(data.x_test.numpy(), data.y_test.numpy())
    assert 0.85 <= accuracy <= 0.94
    # stored results carry the recipe's digest: another recipe, another name
    digest = synthetic_recipe_digest()
    assert len(digest) == 8
    monkeypatch.setitem(SYNTHETIC_RECIPE, "class_sep", 1.0)
    assert synthetic_recipe_digest() != digest


def test_digits_task() -> None:
    data = load_task("digits")
    assert data.kind == "image" and data.class_names == ("0", "1", "2", "3")
    assert data.x_train.shape[1:] == (8, 8)
    assert len(data.y_train) + len(data.y_test) == 720
    assert float(data.x_train.min()) >= 0.0 and float(data.x_train.max()) <= 1.0


def write_image_folder(root, *, classes=("cats", "dogs"), per_class=3, size=(10, 12)):
    from PIL import Image

    rng = np.random.default_rng(0)
    for name in classes:
        (root / name).mkdir(parents=True)
        for i in range(per_class):
            pixels = rng.integers(0, 256, size=(*size, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(root / name / f"{i}.png")
    return root


def test_image_folder_task(tmp_path) -> None:
    pytest.importorskip("PIL")
    root = write_image_folder(tmp_path / "images", per_class=5)
    (tmp_path / "images" / "dogs" / "notes.txt").write_text("not an image")
    data = load_task(f"folder:{root}", image_size=4)
    assert data.class_names == ("cats", "dogs")
    assert data.x_train.shape[1:] == (4, 4)
    assert len(data.y_train) + len(data.y_test) == 10
    assert float(data.x_train.min()) >= 0.0 and float(data.x_train.max()) <= 1.0
    labels = torch.cat([data.y_train, data.y_test])
    assert torch.bincount(labels).tolist() == [5, 5]


def test_image_folder_labels_and_area_resize_are_exact(tmp_path) -> None:
    """Each class's images carry their own label, and an 8x8 image with a white half
    area-resizes to 4x4 with exactly that half white."""
    pytest.importorskip("PIL")
    from PIL import Image

    left = np.zeros((8, 8, 3), dtype=np.uint8)
    left[:, :4] = 255
    top = np.zeros((8, 8, 3), dtype=np.uint8)
    top[:4] = 255
    for name, pixels in (("a_left", left), ("b_top", top)):
        (tmp_path / name).mkdir()
        for i in range(3):
            Image.fromarray(pixels).save(tmp_path / name / f"{i}.png")
    data = load_task(f"folder:{tmp_path}", image_size=4)
    x = torch.cat([data.x_train, data.x_test])
    y = torch.cat([data.y_train, data.y_test])
    half = torch.tensor([1.0, 1.0, 0.0, 0.0])
    for image, label in zip(x, y, strict=True):
        expected = half.expand(4, 4) if label == 0 else half[:, None].expand(4, 4)
        torch.testing.assert_close(image, expected, rtol=0, atol=1e-6)


def test_bad_tasks_fail_clearly(tmp_path) -> None:
    pytest.importorskip("PIL")
    with pytest.raises(InvalidInputError, match="task = 'mnist' is not one of"):
        load_task("mnist")
    with pytest.raises(InvalidInputError, match="does not exist"):
        load_task(f"folder:{tmp_path / 'missing'}")
    with pytest.raises(InvalidInputError, match="needs a path"):
        load_task("folder:")
    one = write_image_folder(tmp_path / "one", classes=("a",))
    with pytest.raises(InvalidInputError, match="1 class sub-directories"):
        load_task(f"folder:{one}")
    empty = write_image_folder(tmp_path / "empty")
    (empty / "zzz").mkdir()
    with pytest.raises(InvalidInputError, match="holds no image files"):
        load_task(f"folder:{empty}")
    broken = write_image_folder(tmp_path / "broken")
    (broken / "cats" / "bad.png").write_bytes(b"not a png")
    with pytest.raises(InvalidInputError, match=r"cannot read image .*bad\.png"):
        load_task(f"folder:{broken}")
    with pytest.raises(InvalidInputError, match="image_size"):
        load_task(f"folder:{broken}", image_size=0)
