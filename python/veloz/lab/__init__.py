"""The lab: experiments, statistics, results and the report."""
