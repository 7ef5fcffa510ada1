"""What every layer shares: errors, paths, the C tools' option tables, bounded
argparse types, versions, subprocesses and NF configs."""
