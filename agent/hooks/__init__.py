"""The agent's runtime hooks: plugins that adjust pods and containers as the runtime proxy creates them."""
