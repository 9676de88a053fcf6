"""How the generated `parallelize` reads its DeviceMesh: the one place that names the
dimensions it knows. Copied into `parallelize`'s body, one level in."""


def mesh_sizes(mesh) -> dict[str, int]:
    # The size of each dimension parallelize reads; an absent one is 1. "dp", the
    # name earlier versions read, is "dp_shard" (FSDP2).
    known = ("dp_replicate", "dp_shard", "cp", "tp", "pp", "ep")
    names = tuple(mesh.mesh_dim_names or ())
    for name in names:
        if name not in (*known, "dp"):
            raise ValueError(f"mesh dimension {name!r}: parallelize reads {known}")
    if "dp" in names and "dp_shard" in names:
        raise ValueError('the mesh names both "dp" and "dp_shard": name one')
    sizes = {name: mesh[name].size() if name in names else 1 for name in known}
    if "dp" in names:
        sizes["dp_shard"] = mesh["dp"].size()
    return sizes


def flat_mesh(mesh, names: tuple[str, ...]):
    # The dimensions of `names` that the mesh has, as one (flattened): the ranks
    # FSDP2 shards over. None when it has none of them.
    present = tuple(name for name in names if name in (mesh.mesh_dim_names or ()))
    if not present:
        return None
    if len(present) == 1:
        return mesh[present[0]]
    return mesh[present]._flatten("_".join(present))
