import { StyleSheet, Text, View } from 'react-native'
import type { components } from '@rxtrace/sdk/schema'

type ColdChain = components['schemas']['ColdChain']

const looks: Record<ColdChain['state'], { label: string; background: string; color: string }> = {
  OK: { label: 'Cold chain OK', background: '#e3f4ea', color: '#0a5d36' },
  EXCURSION: { label: 'Temperature excursion', background: '#fff4d6', color: '#7a4b00' },
  BROKEN: { label: 'Cold chain broken', background: '#fde2e1', color: '#8c1d18' },
  UNMONITORED: { label: 'No cold chain', background: '#eceff1', color: '#37474f' },
}

/** The delivery's cold-chain state in words and colour (not colour alone), with the allowed range when there is one. */
export function ColdChainBadge({ coldChain }: { coldChain: ColdChain }) {
  const look = looks[coldChain.state]
  const range = coldChain.profile ? ` · ${coldChain.profile.min_c}–${coldChain.profile.max_c} °C` : ''
  return (
    <View
      style={[styles.badge, { backgroundColor: look.background }]}
      accessibilityRole="text"
      accessibilityLabel={`${look.label}${range}`}
    >
      <Text style={[styles.text, { color: look.color }]}>
        {look.label}
        {range}
      </Text>
      {coldChain.state === 'BROKEN' && coldChain.break_reason ? (
        <Text style={[styles.reason, { color: look.color }]}>{coldChain.break_reason.replace(/_/g, ' ')}</Text>
      ) : null}
    </View>
  )
}

const styles = StyleSheet.create({
  badge: { borderRadius: 12, paddingHorizontal: 10, paddingVertical: 4, alignSelf: 'flex-start' },
  text: { fontSize: 13, fontWeight: '600' },
  reason: { fontSize: 12 },
})
