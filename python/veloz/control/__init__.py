"""The control plane: NF objects as map operations, and the control socket."""
