"""A small reader for Acclaim ASF (skeleton) / AMC (motion) files, as in the CMU motion-capture database.

ASF describes the skeleton: a root and named bones, each with a rest ``direction``
(unit vector, global frame), a ``length``, an ``axis`` (Euler angles giving the
bone's local frame) and its degrees of freedom ``dof`` (a subset of rx, ry, rz,
in the order the AMC lists them). AMC gives, per frame, the values of every
degree of freedom.

Channel layout (the convention of Lawrence's MATLAB mocap toolbox and its Python
port in ``pods``): the root's channels in the ASF ``order`` (TX TY TZ RX RY RZ for
CMU), then the bones in ASF ``:bonedata`` order, each with its ``dof`` in order.
The CMU skeletons have 62 channels.

Forward kinematics (``joint_positions``): with C_b the rotation of bone b's axis
and R_b(frame) its dof rotation, bone b's global rotation is
``M_b = M_parent C_b R_b C_b^{-1}`` and its end point is
``p_b = p_parent + length_b M_b direction_b``; the root has
``M_root = C_root R_root C_root^{-1}`` and ``p_root = position + translation``.
An Euler order "XYZ" means rotate about x first, then y, then z: ``Rz Ry Rx``.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass

import numpy as np

_AXES = {"x": 0, "y": 1, "z": 2}


@dataclass(frozen=True)
class Bone:
    """One ASF bone; ``direction`` [3] is a unit vector and ``axis`` [3] is in degrees."""

    name: str
    parent: str
    direction: np.ndarray
    length: float
    axis: np.ndarray
    axis_order: str
    dof: tuple[str, ...]


@dataclass(frozen=True)
class Skeleton:
    """An ASF skeleton: root settings and the bones in file order (parents before children)."""

    name: str
    root_order: tuple[str, ...]
    root_axis_order: str
    root_position: np.ndarray
    root_orientation: np.ndarray
    bones: tuple[Bone, ...]
    angle_unit: str
    length_unit: float

    @property
    def channel_names(self) -> list[str]:
        """``"root.tx"``, ..., then ``"bone.rx"`` etc. in the channel layout of this module."""
        names = [f"root.{c}" for c in self.root_order]
        for bone in self.bones:
            names += [f"{bone.name}.{c}" for c in bone.dof]
        return names

    def kinematic_order(self) -> list[Bone]:
        """The bones with every parent before its children (file order where it allows)."""
        ordered, placed, remaining = [], {"root"}, list(self.bones)
        while remaining:
            ready = [b for b in remaining if b.parent in placed]
            if not ready:
                raise ValueError(f"ASF: bones {[b.name for b in remaining]} are not connected to the root")
            ordered += ready
            placed.update(b.name for b in ready)
            remaining = [b for b in remaining if b.name not in placed]
        return ordered

    def bone(self, name: str) -> Bone:
        for bone in self.bones:
            if bone.name == name:
                return bone
        raise KeyError(f"skeleton {self.name!r} has no bone {name!r}")


def _read_text(source) -> str:
    if isinstance(source, (str, os.PathLike)):
        with open(source, encoding="ascii") as handle:
            return handle.read()
    if isinstance(source, io.IOBase) or hasattr(source, "read"):
        text = source.read()
        return text.decode("ascii") if isinstance(text, bytes) else text
    raise TypeError(f"expected a path or an open file, got {type(source).__name__}")


def _content_lines(text: str):
    """(line number, stripped line) without blank lines and comments; handles CRLF."""
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if line:
            yield number, line


def read_asf(source) -> Skeleton:
    """Parse an ASF skeleton from a path or an open text file.

    Examples
    --------
    >>> import io
    >>> asf = io.StringIO(":root\\n order TX TY TZ RX RY RZ\\n axis XYZ\\n position 0 0 0\\n"
    ...                   " orientation 0 0 0\\n:bonedata\\n begin\\n name hip\\n direction 0 -1 0\\n"
    ...                   " length 2\\n axis 0 0 0 XYZ\\n dof rx\\n end\\n:hierarchy\\n begin\\n root hip\\n end\\n")
    >>> skel = read_asf(asf)
    >>> skel.channel_names
    ['root.tx', 'root.ty', 'root.tz', 'root.rx', 'root.ry', 'root.rz', 'hip.rx']
    """
    lines = list(_content_lines(_read_text(source)))
    name, angle_unit, length_unit = "", "deg", 1.0
    root = {"order": ("tx", "ty", "tz", "rx", "ry", "rz"), "axis": "XYZ",
            "position": np.zeros(3), "orientation": np.zeros(3)}
    raw_bones: list[dict] = []
    parents: dict[str, str] = {}
    section, current = None, None
    for number, line in lines:
        words = line.split()
        key = words[0].lower()
        if line.startswith(":"):
            section = key[1:]
            if section == "name" and len(words) > 1:
                name = words[1]
            continue
        try:
            if section == "units":
                if key == "angle":
                    angle_unit = words[1].lower()[:3]
                elif key == "length":
                    length_unit = float(words[1])
            elif section == "root":
                if key == "order":
                    root["order"] = tuple(w.lower() for w in words[1:])
                elif key == "axis":
                    root["axis"] = words[1].upper()
                elif key in ("position", "orientation"):
                    root[key] = np.array([float(w) for w in words[1:4]])
            elif section == "bonedata":
                if key == "begin":
                    current = {"dof": ()}
                elif key == "end":
                    raw_bones.append(current)
                    current = None
                elif current is None:
                    raise ValueError("data outside a begin/end block")
                elif key == "name":
                    current["name"] = words[1]
                elif key == "direction":
                    current["direction"] = np.array([float(w) for w in words[1:4]])
                elif key == "length":
                    current["length"] = float(words[1])
                elif key == "axis":
                    current["axis"] = np.array([float(w) for w in words[1:4]])
                    current["axis_order"] = words[4].upper() if len(words) > 4 else "XYZ"
                elif key == "dof":
                    current["dof"] = tuple(w.lower() for w in words[1:])
            elif section == "hierarchy" and key not in ("begin", "end"):
                for child in words[1:]:
                    parents[child] = words[0]
        except (IndexError, ValueError) as exc:
            raise ValueError(f"ASF line {number}: cannot parse {line!r} ({exc})") from None
    if angle_unit not in ("deg", "rad"):
        raise ValueError(f"ASF: unknown angle unit {angle_unit!r}")
    bones = []
    for raw in raw_bones:
        missing = {"name", "direction", "length", "axis"} - set(raw)
        if missing:
            raise ValueError(f"ASF bone {raw.get('name', '?')!r}: missing {sorted(missing)}")
        if raw["name"] not in parents:
            raise ValueError(f"ASF bone {raw['name']!r} has no parent in :hierarchy")
        bad = [d for d in raw["dof"] if d not in ("rx", "ry", "rz")]
        if bad:
            raise ValueError(f"ASF bone {raw['name']!r}: unsupported dof {bad}")
        direction = raw["direction"] / np.linalg.norm(raw["direction"])
        bones.append(Bone(raw["name"], parents[raw["name"]], direction, raw["length"], raw["axis"],
                          raw["axis_order"], raw["dof"]))
    skeleton = Skeleton(name, root["order"], root["axis"], root["position"], root["orientation"],
                        tuple(bones), angle_unit, length_unit)
    skeleton.kinematic_order()  # raises if some bone is not connected to the root
    return skeleton


def read_amc(source, skeleton: Skeleton) -> tuple[np.ndarray, np.ndarray]:
    """Parse AMC motion into a channel matrix.

    Returns
    -------
    channels : ndarray [T, C]
        One row per frame, columns as ``skeleton.channel_names`` (angles in the
        file's unit, degrees for CMU).
    frame_numbers : ndarray [T] of int
        The frame numbers written in the file.
    """
    layout, column = {}, 0
    layout["root"] = (column, len(skeleton.root_order))
    column += len(skeleton.root_order)
    for bone in skeleton.bones:
        layout[bone.name] = (column, len(bone.dof))
        column += len(bone.dof)
    n_channels = column
    rows, numbers, seen = [], [], set()

    def close_frame(line_number):
        if rows:
            missing = [b for b, (_, width) in layout.items() if width and b not in seen]
            if missing:
                raise ValueError(f"AMC frame {numbers[-1]} (ending near line {line_number}): "
                                 f"no values for {missing}")

    number = 0
    for number, line in _content_lines(_read_text(source)):
        if line.startswith(":"):
            continue
        words = line.split()
        if len(words) == 1 and words[0].isdigit():
            close_frame(number)
            rows.append(np.zeros(n_channels))
            numbers.append(int(words[0]))
            seen = set()
            continue
        if not rows:
            raise ValueError(f"AMC line {number}: values before the first frame number")
        bone = words[0]
        if bone not in layout:
            raise ValueError(f"AMC line {number}: unknown bone {bone!r}")
        start, width = layout[bone]
        if len(words) - 1 != width:
            raise ValueError(f"AMC line {number}: bone {bone!r} has {width} dof, got {len(words) - 1} values")
        try:
            rows[-1][start:start + width] = [float(w) for w in words[1:]]
        except ValueError:
            raise ValueError(f"AMC line {number}: non-numeric value in {line!r}") from None
        seen.add(bone)
    close_frame(number)
    if not rows:
        raise ValueError("AMC: no frames")
    return np.vstack(rows), np.asarray(numbers, dtype=np.int64)


def _euler_matrices(angles: np.ndarray, order: str) -> np.ndarray:
    """Rotation matrices [T, 3, 3] for angles [T, k] (radians) about the axes in ``order`` (applied first
    to last, so "XYZ" gives Rz Ry Rx)."""
    result = np.broadcast_to(np.eye(3), (angles.shape[0], 3, 3)).copy()
    for k, axis in enumerate(order.lower()):
        i = _AXES[axis]
        j, m = (i + 1) % 3, (i + 2) % 3  # cyclic, so (j, m) = (y, z), (z, x), (x, y): right-handed
        c, s = np.cos(angles[:, k]), np.sin(angles[:, k])
        step = np.broadcast_to(np.eye(3), result.shape).copy()
        step[:, j, j], step[:, j, m], step[:, m, j], step[:, m, m] = c, -s, s, c
        result = step @ result
    return result


def joint_positions(channels: np.ndarray, skeleton: Skeleton) -> tuple[np.ndarray, list[str]]:
    """3-D positions of the root and of every bone's end point, by forward kinematics.

    Parameters
    ----------
    channels : ndarray [T, C] as returned by ``read_amc``

    Returns
    -------
    positions : ndarray [T, J, 3], J = 1 + number of bones (root first, then bones in skeleton order)
    joint_names : list of str
    """
    channels = np.asarray(channels, dtype=np.float64)
    names = skeleton.channel_names
    if channels.ndim != 2 or channels.shape[1] != len(names):
        raise ValueError(f"channels: expected shape (T, {len(names)}), got {channels.shape}")
    to_rad = np.pi / 180.0 if skeleton.angle_unit == "deg" else 1.0
    n_frames = channels.shape[0]
    column = {name: k for k, name in enumerate(names)}

    def dof_rotation(owner: str, dofs) -> np.ndarray:
        if not dofs:
            return np.broadcast_to(np.eye(3), (n_frames, 3, 3))
        angles = channels[:, [column[f"{owner}.{d}"] for d in dofs]] * to_rad  # [T, k]
        return _euler_matrices(angles, "".join(d[1] for d in dofs))

    def axis_rotation(axis: np.ndarray, order: str) -> np.ndarray:
        return _euler_matrices((np.asarray(axis) * to_rad)[None, :], order)[0]

    root_rot_dofs = [c for c in skeleton.root_order if c.startswith("r")]
    root_c = axis_rotation(skeleton.root_orientation, skeleton.root_axis_order)
    rotation = {"root": root_c @ dof_rotation("root", root_rot_dofs) @ root_c.T}  # [T, 3, 3]
    translation = np.zeros((n_frames, 3))
    for axis in "xyz":
        if f"t{axis}" in skeleton.root_order:
            translation[:, _AXES[axis]] = channels[:, column[f"root.t{axis}"]]
    position = {"root": skeleton.root_position + translation}  # [T, 3]
    for bone in skeleton.kinematic_order():
        c = axis_rotation(bone.axis, bone.axis_order)
        rotation[bone.name] = rotation[bone.parent] @ (c @ dof_rotation(bone.name, bone.dof) @ c.T)
        position[bone.name] = position[bone.parent] + bone.length * (rotation[bone.name] @ bone.direction)
    joint_names = ["root"] + [b.name for b in skeleton.bones]
    return np.stack([position[n] for n in joint_names], axis=1), joint_names
