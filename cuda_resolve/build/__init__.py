"""Source builds: fetch a recipe's source, check the machine can build it, build a wheel against
the target's torch."""
