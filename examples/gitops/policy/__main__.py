"""The Together RL policy pack (pulumi_together_rl.policy): made by `python -m pulumi_together_rl policy-pack`."""

from pulumi_together_rl.policy.pack import main

main()
