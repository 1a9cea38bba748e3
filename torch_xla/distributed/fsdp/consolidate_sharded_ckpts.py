"""`python -m torch_xla.distributed.fsdp.consolidate_sharded_ckpts --ckpt_prefix P
[--ckpt_suffix S] [--save_path F]`: the FSDP checkpoints matching P + S as one."""
from argparse import ArgumentParser

from .state_dict_utils import consolidate_sharded_model_checkpoints


def main(argv=None):
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("--ckpt_prefix", type=str, required=True,
                        help="path prefix of the FSDP checkpoint files (prefix + suffix is a glob)")
    parser.add_argument("--ckpt_suffix", type=str, default="*.pth", help="path suffix of the files")
    parser.add_argument("--save_path", type=str, default="",
                        help="where to save (default ckpt_prefix + '_consolidated.pth')")
    args = parser.parse_args(argv)
    consolidate_sharded_model_checkpoints(args.ckpt_prefix, args.ckpt_suffix, args.save_path)


if __name__ == "__main__":
    main()
