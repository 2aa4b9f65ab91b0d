"""The episode contract: what the policy called and what those calls solved.

The rollout writes it (`call_log`: one record per tool call, the episode's log in
`extra_info`) and the reward, the training metrics and the inspector read it (`solved`: which
golden sub-questions a call or the final answer settled). It sits below both `rollout` and
`reward` so that neither has to import the other to share it.
"""
